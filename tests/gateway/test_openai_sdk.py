"""The official OpenAI Python SDK, given only base_url and the Euler key, works through the gateway."""

import pytest

from agents.services import agent_create
from tests.gateway.servers import FakeOpenAI, ServerThread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake_openai():
    app = FakeOpenAI()
    app.server = ServerThread(app).start()
    yield app
    app.first_token_read.set()
    app.server.stop()


@pytest.fixture
def sdk(project, gateway, api_key, fake_openai):
    import openai

    agent_create(project=project, fields={"name": "llm"}, instances=[{"base_url": fake_openai.server.url}])
    with openai.OpenAI(base_url=f"{gateway}/api/v1/agents/llm/invoke/v1", api_key=api_key, max_retries=0) as client:
        yield client


def test_the_sdk_gets_a_chat_completion_and_the_key_stays_home(sdk, fake_openai, api_key):
    answer = sdk.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Hello from the fake"
    seen = fake_openai.requests[-1]
    assert seen["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert "authorization" not in seen["headers"]
    assert api_key not in str(seen["headers"])


def test_the_sdk_streams_token_by_token(sdk, fake_openai):
    stream = sdk.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}], stream=True)
    tokens = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            tokens.append(chunk.choices[0].delta.content)
            # The agent holds the rest until this first token has come out of the SDK: a
            # buffering relay would hang here until the agent's wait runs out.
            fake_openai.first_token_read.set()
    assert tokens == FakeOpenAI.TOKENS
    assert fake_openai.streamed is True
