"""Nets: NetDef -> validated graph, shape inference, executors, plans, backward pass."""
