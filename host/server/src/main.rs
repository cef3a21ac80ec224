//! The `tollgate` binary: the CLI in `tollgate::cli`, with errors printed in full.

fn main() -> std::process::ExitCode {
    match tollgate::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
