import pytest
from django.test import Client


@pytest.fixture
def browser_client():
    """A Django test client (cookies, CSRF off) for console pages."""
    return Client()


@pytest.fixture
def signed_in(browser_client, owner, project):
    browser_client.force_login(owner)
    return browser_client
