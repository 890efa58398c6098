"""The agent trusts the control plane's certificate only through its CA file (EULER_CA_FILE / --ca-file), against
a real TLS server on loopback signed by a private CA, as Caddy's `tls internal` signs the shipped stack's front."""

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodeagent.client import ControlPlaneClient, Unreachable
from nodeagent.config import ConfigError, load
from nodeagent.process import parse_args


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory, cn):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{cn}.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def make_server_cert(directory, ca_key, ca_cert):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path):
    ca_key, ca_cert, ca_path = make_ca(tmp_path, "Euler Test Internal CA")
    _, _, other_ca_path = make_ca(tmp_path, "Some Other CA")
    cert_path, key_path = make_server_cert(tmp_path, ca_key, ca_cert)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            data = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", ca_path, other_ca_path
    httpd.shutdown()
    httpd.server_close()


def test_it_talks_to_a_control_plane_signed_by_its_ca_file(tls_server):
    url, ca_path, _ = tls_server
    client = ControlPlaneClient(url, ca_file=ca_path)
    assert client.call("POST", "heartbeat", {}) == {"ok": True}
    client.close()


def test_it_refuses_a_certificate_from_a_ca_it_was_not_given(tls_server):
    url, _, _ = tls_server
    client = ControlPlaneClient(url)  # the public CAs only
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        client.call("POST", "heartbeat", {}, timeout=5)
    client.close()


def test_a_ca_file_replaces_the_public_cas_rather_than_adding_to_them(tls_server):
    url, _, other_ca_path = tls_server
    client = ControlPlaneClient(url, ca_file=other_ca_path)
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        client.call("POST", "heartbeat", {}, timeout=5)
    client.close()


def test_config_reads_the_ca_file_and_refuses_one_it_cannot_load(tmp_path):
    _, _, ca_path = make_ca(tmp_path, "Lab CA")
    base = {"EULER_CONTROL_PLANE_URL": "https://euler.lab", "EULER_NODE_NAME": "n1"}
    assert load({**base, "EULER_CA_FILE": str(ca_path)}).ca_file == ca_path
    assert load(base).ca_file is None
    with pytest.raises(ConfigError, match="EULER_CA_FILE"):
        load({**base, "EULER_CA_FILE": str(tmp_path / "missing.crt")})
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate")
    with pytest.raises(ConfigError, match="EULER_CA_FILE"):
        load({**base, "EULER_CA_FILE": str(garbage)})


def test_the_ca_file_option_stands_for_the_variable():
    env = parse_args(["--ca-file", "/etc/euler/ca.crt"], {"EULER_CONTROL_PLANE_URL": "https://euler.lab"})
    assert env["EULER_CA_FILE"] == "/etc/euler/ca.crt"
