"""One module per `mt` subcommand: each parses nothing (cli.py does), builds from the library,
runs, and is the only place that writes output files; translations and tokens go to a file or
stdout through output.write_output (cli.py prints the one-line summaries)."""
