"""Process exit codes (README "Exit codes"). Here, below the suites, so a runner can return one
without importing the CLI; ``metewand.cli.exit_codes`` re-exports them."""

OK = 0
BENCHMARK_FAILURES = 1  # a run finished but some attempts failed, where the user asked to know
INVALID_INPUT = 2  # bad manifest, task file, flag or argument; nothing was run
ENVIRONMENT_MISSING = 3  # something a run needs (engine, backend) is missing
INTERRUPTED = 130  # Ctrl-C: the run is marked interrupted and can be resumed
