"""patchguard: keep local patches in a git checkout, and fail loudly when they are gone."""
