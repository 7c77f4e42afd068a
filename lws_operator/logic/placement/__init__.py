"""Placement and gangs: exclusive topology, native gang scheduling objects, volcano objects. The
scheduler providers that create them in a pass are ``logic.providers``."""
