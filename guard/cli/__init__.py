"""Layer 7, the faces: the click commands, the hook runner, check and require (preflight), and
the rendering of reports as text or versioned JSON. Imports any layer below.

(No imports here: guard.cli.app loads the module of the command that runs, alone.)"""
