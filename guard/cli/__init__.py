"""Layer 7: the commands, the hook runner, preflight and the reports. No imports here:
guard.cli.app loads the module of the command that runs, alone."""
