"""The objects a set's groups run in: leader and worker StatefulSets, headless Services."""
