"""Thin kopf handlers: observe, call the logic layer, execute its plan.

No business rule lives here.
"""
