"""One module per subcommand; each defines NAME, HELP, add_arguments(parser) and run(args)."""
