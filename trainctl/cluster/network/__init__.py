"""Networking for pods that all run on this machine.

Two pod networks (:mod:`.isolation` chooses one). On the shared network each pod gets its own
loopback address (:mod:`.pod_ipam`) from its cluster's slice of the loopback range
(:mod:`.ranges`), Service names in a container's env and command line are rewritten to
addresses that reach the right pod (:mod:`.names`), ClusterIP Services are served by a
userspace proxy (:mod:`.proxy`), and Python processes can also resolve Service names at run
time through a hosts file kept in the cluster directory (:mod:`.hosts`). On the isolated
network each pod has a network namespace of its own, wired by the network router
(:mod:`.router`). Nothing outside the cluster directory is changed. docs/local-cluster.md
has the rules.
"""
