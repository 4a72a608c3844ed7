"""The HTTP face of the API server: the aiohttp server and its routes, query parameters and
bodies, responses, watch and log streams, exec/attach/portforward, Tables, discovery, OpenAPI
and ``/metrics``."""
