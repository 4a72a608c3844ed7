"""Who is asking and what they may do: tokens and the server's certificates, authentication,
RBAC authorization and the review kinds, behind the one gate every request passes (``access``)."""
