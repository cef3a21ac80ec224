//! A run's cost budget as a tree: the run is the root and each subtask or
//! map item a child with its own slice. A model call first holds its worst
//! case against its node and every ancestor, atomically, and settles to the
//! actual cost afterwards, so concurrent calls together can never spend past
//! any node's cap.

use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the call could cost up to {worst_case} nanodollars, but only {remaining} remain in the run's budget")]
pub struct BudgetExceeded {
    pub worst_case: i64,
    pub remaining: i64,
}

#[derive(Debug)]
struct Node {
    cap: Option<i64>,
    spent: i64,
    held: i64,
    parent: Option<usize>,
}

/// One node of a run's budget tree.
#[derive(Clone, Debug)]
pub struct Meter {
    tree: Arc<Mutex<Vec<Node>>>,
    node: usize,
}

impl Meter {
    /// A run's budget: `cap` nanodollars, or unlimited.
    pub fn root(cap: Option<i64>) -> Self {
        let node = Node {
            cap,
            spent: 0,
            held: 0,
            parent: None,
        };
        Self {
            tree: Arc::new(Mutex::new(vec![node])),
            node: 0,
        }
    }

    /// A slice of this budget: spending in it counts here too.
    pub fn child(&self, cap: Option<i64>) -> Self {
        let mut tree = self.tree.lock().expect("meter lock");
        tree.push(Node {
            cap,
            spent: 0,
            held: 0,
            parent: Some(self.node),
        });
        Self {
            tree: self.tree.clone(),
            node: tree.len() - 1,
        }
    }

    /// Settled spending of this node (its children's included).
    pub fn spent(&self) -> i64 {
        self.tree.lock().expect("meter lock")[self.node].spent
    }

    /// What may still be held here: the least headroom along the chain to
    /// the root; `None` when no node on it has a cap.
    pub fn remaining(&self) -> Option<i64> {
        let tree = self.tree.lock().expect("meter lock");
        headroom(&tree, self.node)
    }

    /// Holds `worst_case` here and in every ancestor, or refuses without
    /// holding anything.
    pub fn try_hold(&self, worst_case: i64) -> Result<Hold, BudgetExceeded> {
        let mut tree = self.tree.lock().expect("meter lock");
        if let Some(remaining) = headroom(&tree, self.node)
            && worst_case > remaining
        {
            return Err(BudgetExceeded { worst_case, remaining });
        }
        for index in chain(&tree, self.node) {
            tree[index].held += worst_case;
        }
        Ok(Hold {
            meter: self.clone(),
            amount: worst_case,
            settled: false,
        })
    }

    fn settle(&self, held: i64, actual: i64) {
        let mut tree = self.tree.lock().expect("meter lock");
        for index in chain(&tree, self.node) {
            tree[index].held -= held;
            tree[index].spent += actual;
        }
    }
}

fn chain(tree: &[Node], mut node: usize) -> Vec<usize> {
    let mut chain = vec![node];
    while let Some(parent) = tree[node].parent {
        chain.push(parent);
        node = parent;
    }
    chain
}

fn headroom(tree: &[Node], node: usize) -> Option<i64> {
    chain(tree, node)
        .into_iter()
        .filter_map(|index| {
            let n = &tree[index];
            n.cap.map(|cap| cap - n.spent - n.held)
        })
        .min()
}

/// A held worst case. Settle it with the actual cost; dropped unsettled
/// (an abandoned call), it counts as spent in full, erring on the side of
/// never overspending.
#[derive(Debug)]
pub struct Hold {
    meter: Meter,
    amount: i64,
    settled: bool,
}

impl Hold {
    pub fn amount(&self) -> i64 {
        self.amount
    }

    pub fn settle(mut self, actual: i64) {
        self.settled = true;
        self.meter.settle(self.amount, actual);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.settled {
            self.meter.settle(self.amount, self.amount);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_count_against_every_ancestor() {
        let run = Meter::root(Some(100));
        let item = run.child(Some(80));
        let other = run.child(None);
        let held = item.try_hold(60).unwrap();
        assert_eq!(run.remaining(), Some(40));
        assert_eq!(
            other.try_hold(41).unwrap_err(),
            BudgetExceeded {
                worst_case: 41,
                remaining: 40
            }
        );
        held.settle(10);
        assert_eq!((item.spent(), run.spent()), (10, 10));
        assert_eq!(item.remaining(), Some(70));
        assert_eq!(other.remaining(), Some(90));
    }

    #[test]
    fn an_abandoned_hold_counts_in_full() {
        let run = Meter::root(None);
        drop(run.try_hold(7).unwrap());
        assert_eq!(run.spent(), 7);
        assert_eq!(run.remaining(), None);
    }
}
