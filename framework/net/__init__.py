"""Nets: NetDef -> validated graph (graph), shape inference (inference), executors
(simple, dag, prof_dag), plans, backward pass, and the workspace-level entry points (api)."""

from framework.net.base import NET_TYPES, NetBase, instantiate
from framework.net.graph import NetGraph, compile_graph, format_op, load_net_def
from framework.net.nested import install_services

install_services()  # control-flow ops build nested nets through the net layer

__all__ = ["NET_TYPES", "NetBase", "NetGraph", "compile_graph", "format_op", "instantiate", "load_net_def"]
