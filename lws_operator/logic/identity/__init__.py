"""Group identity and revisions: group keys, template revisions and their decision, adoption of
another controller's rollout. Hash-mode groups, which build on more than identity, are
``logic.hash_mode``."""
