"""Networking for pods that all run on this machine's loopback interface.

Each pod gets its own loopback address (``ipam``), Service names in a container's env and
command line are rewritten to addresses that reach the right pod (``names``), ClusterIP
Services are served by a userspace proxy (``proxy``), and Python processes can also resolve
Service names at run time through a hosts file kept in the cluster directory (``hosts``).
Nothing outside the cluster directory is changed. docs/local-cluster.md has the rules.
"""

POD_CIDR = "127.128.0.0/16"
SERVICE_CIDR = "127.96.0.0/16"
HOST_IP = "127.0.0.1"
CLUSTER_DOMAIN = "cluster.local"
