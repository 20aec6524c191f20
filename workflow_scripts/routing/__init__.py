"""Routing stage (Studies A and B): utility labels, features, routers and budget frontiers."""
