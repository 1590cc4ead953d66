"""Layer 7, the faces: the click commands, the hook runner, check and require (preflight), and
the rendering of reports as text or versioned JSON. Imports any layer below.

(No imports here: a hook imports guard.cli.hookrun alone, without click.)"""
