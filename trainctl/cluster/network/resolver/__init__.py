"""Holds the ``sitecustomize`` module the kubelet copies next to the cluster's hosts file."""
