//! The `dynafold` command: argument parsing only; each subcommand lives in `src/cli/`.

fn main() {
    std::process::exit(0);
}
