"""Kubernetes objects as the API sends them: metadata readers, quantities, Events as data."""
