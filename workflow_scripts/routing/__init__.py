"""Routing stage (Studies A and B): utility labels, features, routers, budget frontiers and paired statistics."""
