"""Layer 4, what the worktree holds: each patch's state (assess), apply and unapply, repair of
unmerged files, record and resolve, stashes, the replay of a move. Imports the layers below."""
