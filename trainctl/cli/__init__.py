"""Every ``trainctl`` subcommand, a module each; ``main`` wires them together."""
