"""One module per `mt` subcommand: each parses nothing (cli.py does), builds from the library,
runs, and is the only place that writes output files or stdout."""
