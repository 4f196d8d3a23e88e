"""The kit's own HTTPS client side of a Flink cluster whose REST API requires mutual TLS (issue 45;
harness/cluster_auth.py makes the files): the certificate it trusts (`ca.pem`, the cluster's
self-signed one, nothing else) and the one it presents (`client.pem`, key and certificate, 0600).

`CREDENTIALS_ENV` names the directory in a program's environment (the path only). `rest_base`
turns a JobManager's host and port into its base URL (https when there are credentials);
`urlopen` opens a URL with the credentials' context when the URL is https.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from functools import lru_cache
from pathlib import Path

CREDENTIALS_ENV = "CEPKIT_CLUSTER_CREDENTIALS"
CLIENT_PEM, CA_PEM = "client.pem", "ca.pem"


def credentials_dir() -> str | None:
    return os.environ.get(CREDENTIALS_ENV) or None


@lru_cache(maxsize=4)
def client_context(directory: str) -> ssl.SSLContext:
    """Trust only the cluster's certificate; present the client's."""
    ctx = ssl.create_default_context(cafile=str(Path(directory) / CA_PEM))
    ctx.load_cert_chain(str(Path(directory) / CLIENT_PEM))
    return ctx


def rest_base(host: str, port: int, directory: str | None = None) -> str:
    directory = directory or credentials_dir()
    return f"{'https' if directory else 'http'}://{host}:{port}"


def urlopen(url, timeout: float, directory: str | None = None):
    """urllib's urlopen; an https URL with the cluster's client credentials (`directory`, else
    CREDENTIALS_ENV)."""
    target = url.full_url if isinstance(url, urllib.request.Request) else str(url)
    directory = directory or credentials_dir()
    if target.startswith("https:") and directory:
        return urllib.request.urlopen(url, timeout=timeout, context=client_context(directory))
    return urllib.request.urlopen(url, timeout=timeout)
