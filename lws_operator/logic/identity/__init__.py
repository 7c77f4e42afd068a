"""Group identity and revisions: group keys, template revisions, Hash-mode group identity."""
