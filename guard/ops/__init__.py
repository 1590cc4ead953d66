"""Layer 5, the operations users name: moves (`patchguard git`), bisect's state, installing
the hooks, and the provenance a stamp records. Imports the layers below."""
