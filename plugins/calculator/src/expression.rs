//! Arithmetic expressions over [`Decimal`]: a tokenizer and a recursive-descent
//! parser that evaluates as it parses. Every operation is checked: overflow,
//! division by zero and over-deep nesting are errors, never panics.
//!
//! Grammar (usual precedence; `^` binds tightest and is right-associative):
//! ```text
//! sum     = product (("+" | "-") product)*
//! product = unary (("*" | "/" | "%") unary)*
//! unary   = ("-" | "+") unary | power
//! power   = atom ("^" unary)?
//! atom    = number | "(" sum ")"
//! ```

use std::str::FromStr;

use rust_decimal::Decimal;

/// Longest expression accepted, in bytes.
pub const MAX_LENGTH: usize = 4096;
/// Deepest nesting of parentheses and unary signs.
const MAX_DEPTH: usize = 64;
/// Largest exponent magnitude for `^`.
const MAX_EXPONENT: i64 = 4096;

pub fn evaluate(text: &str) -> Result<Decimal, String> {
    if text.len() > MAX_LENGTH {
        return Err(format!("the expression is longer than {MAX_LENGTH} bytes"));
    }
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return Err("the expression is empty".into());
    }
    let mut parser = Parser {
        tokens,
        position: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    match parser.peek() {
        None => Ok(value),
        Some(token) => Err(format!("unexpected {token} after a complete expression")),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(Decimal),
    Operator(char),
    Open,
    Close,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Number(n) => write!(f, "number {n}"),
            Token::Operator(c) => write!(f, "'{c}'"),
            Token::Open => f.write_str("'('"),
            Token::Close => f.write_str("')'"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '0'..='9' | '.' => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, d)) = chars.peek() {
                    if !(d.is_ascii_digit() || d == '.' || d == '_') {
                        break;
                    }
                    end = i + d.len_utf8();
                    chars.next();
                }
                let literal: String = text[start..end].chars().filter(|&d| d != '_').collect();
                let number = Decimal::from_str(&literal)
                    .map_err(|_| format!("'{}' is not a number this calculator can hold", &text[start..end]))?;
                tokens.push(Token::Number(number));
            }
            '+' | '-' | '*' | '/' | '%' | '^' => tokens.push(Token::Operator(c)),
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            other => return Err(format!("unexpected character '{other}' at byte {start}")),
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    fn operator(&mut self, accepted: &[char]) -> Option<char> {
        match self.peek() {
            Some(Token::Operator(c)) if accepted.contains(c) => {
                let c = *c;
                self.position += 1;
                Some(c)
            }
            _ => None,
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the expression nests deeper than {MAX_DEPTH} levels"));
        }
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn sum(&mut self) -> Result<Decimal, String> {
        let mut value = self.product()?;
        while let Some(op) = self.operator(&['+', '-']) {
            let right = self.product()?;
            value = match op {
                '+' => value.checked_add(right),
                _ => value.checked_sub(right),
            }
            .ok_or_else(too_large)?;
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<Decimal, String> {
        let mut value = self.unary()?;
        while let Some(op) = self.operator(&['*', '/', '%']) {
            let right = self.unary()?;
            if op != '*' && right.is_zero() {
                return Err("division by zero".into());
            }
            value = match op {
                '*' => value.checked_mul(right),
                '/' => value.checked_div(right),
                _ => value.checked_rem(right),
            }
            .ok_or_else(too_large)?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<Decimal, String> {
        match self.operator(&['-', '+']) {
            Some('-') => self.nested(|p| p.unary()).map(|v| -v),
            Some(_) => self.nested(|p| p.unary()),
            None => self.power(),
        }
    }

    fn power(&mut self) -> Result<Decimal, String> {
        let base = self.atom()?;
        if self.operator(&['^']).is_none() {
            return Ok(base);
        }
        let exponent = self.nested(|p| p.unary())?;
        power(base, exponent)
    }

    fn atom(&mut self) -> Result<Decimal, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(n),
            Some(Token::Open) => {
                let value = self.nested(|p| p.sum())?;
                match self.next() {
                    Some(Token::Close) => Ok(value),
                    Some(token) => Err(format!("expected ')' but found {token}")),
                    None => Err("a '(' is never closed".into()),
                }
            }
            Some(token) => Err(format!("expected a number or '(' but found {token}")),
            None => Err("the expression ends where a number was expected".into()),
        }
    }
}

/// `base ^ exponent` for an integer exponent, by squaring, every step checked.
fn power(base: Decimal, exponent: Decimal) -> Result<Decimal, String> {
    if !exponent.fract().is_zero() {
        return Err(format!("the exponent {exponent} is not an integer"));
    }
    let exponent = i64::try_from(exponent).map_err(|_| too_large())?;
    if exponent.abs() > MAX_EXPONENT {
        return Err(format!("exponents are limited to ±{MAX_EXPONENT}"));
    }
    if exponent < 0 && base.is_zero() {
        return Err("division by zero".into());
    }
    let mut result = Decimal::ONE;
    let mut square = base;
    let mut remaining = exponent.unsigned_abs();
    while remaining > 0 {
        if remaining & 1 == 1 {
            result = result.checked_mul(square).ok_or_else(too_large)?;
        }
        remaining >>= 1;
        if remaining > 0 {
            square = square.checked_mul(square).ok_or_else(too_large)?;
        }
    }
    if exponent < 0 {
        result = Decimal::ONE.checked_div(result).ok_or_else(too_large)?;
    }
    Ok(result)
}

fn too_large() -> String {
    "the result is too large for 28 significant digits".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> String {
        evaluate(text).unwrap().normalize().to_string()
    }

    #[test]
    fn computes_exactly_with_the_usual_precedence() {
        assert_eq!(eval("2*(3+4)"), "14");
        assert_eq!(eval("0.1 + 0.2"), "0.3");
        assert_eq!(eval("1 - 2 - 3"), "-4");
        assert_eq!(eval("2 + 3 * 4"), "14");
        assert_eq!(eval("2 ^ 3 ^ 2"), "512");
        assert_eq!(eval("-2 ^ 2"), "-4");
        assert_eq!(eval("(-2) ^ 2"), "4");
        assert_eq!(eval("2 ^ -2"), "0.25");
        assert_eq!(eval("7 % 3"), "1");
        assert_eq!(eval("10 / 4"), "2.5");
        assert_eq!(eval("1_000 * 3"), "3000");
        assert_eq!(eval("1/3"), "0.3333333333333333333333333333");
    }

    #[test]
    fn bad_expressions_are_errors_not_panics() {
        for (text, expected) in [
            ("", "empty"),
            ("2 +", "ends where a number"),
            ("(1 + 2", "never closed"),
            ("1 / 0", "division by zero"),
            ("1 % 0", "division by zero"),
            ("0 ^ -1", "division by zero"),
            ("2 ^ 0.5", "not an integer"),
            ("10 ^ 100", "too large"),
            ("2 $ 3", "unexpected character"),
            ("1.2.3", "not a number"),
            ("1 2", "after a complete expression"),
        ] {
            let error = evaluate(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(evaluate(&deep).unwrap_err().contains("nests deeper"));
        assert!(evaluate(&"1+".repeat(3000)).unwrap_err().contains("longer than"));
    }
}
