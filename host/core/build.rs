//! `sqlx::migrate!` embeds the migrations at compile time; rebuild when one is
//! added or changed (cargo does not watch the folder on its own).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
