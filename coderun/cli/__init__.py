"""The command line: one module per command group; `main` only registers them."""
