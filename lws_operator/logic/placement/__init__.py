"""Placement and gangs: exclusive topology, native gang scheduling, volcano, scheduler providers."""
