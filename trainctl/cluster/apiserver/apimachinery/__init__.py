"""The vocabulary every part of the API server shares, as k8s.io/apimachinery is kube-apiserver's:
``metav1.Status`` errors, the kinds served (``registry``, with ``event_conversion``), label and
field selectors, the JSONPath subset CRDs use, and the size and depth limits of a write."""
