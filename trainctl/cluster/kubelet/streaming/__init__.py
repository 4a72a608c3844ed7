"""The kubelet's streaming server: ``kubectl exec``, ``attach``, ``cp`` and ``port-forward``.

kube-apiserver runs nothing in a pod itself: it proxies ``pods/exec``, ``pods/attach`` and
``pods/portforward`` to the kubelet of the pod's node, on the port the Node advertises in
``status.daemonEndpoints.kubeletEndpoint.Port``. This package is that end: the HTTP server
(``server``), the WebSocket channel protocol of exec and attach (``remotecommand``), port
forwarding over SPDY/3.1 (``portforward`` on ``spdy``), and the plain SPDY/3.1 upgrade older
kubectl speaks for all three (``spdyupgrade``).
"""
