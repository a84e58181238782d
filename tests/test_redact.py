"""harness.redact: one rule for what is a secret, applied to argv, data and config text."""

from harness.redact import is_secret_name, redact_argv, redact_command_line, redact_data


def test_secret_names_and_pointers() -> None:
    assert is_secret_name("HF_TOKEN") and is_secret_name("api_key") and is_secret_name("--api-key")
    assert not is_secret_name("passphrase_env") and not is_secret_name("api_key_file")
    assert not is_secret_name("model")


def test_argv_and_command_line() -> None:
    assert redact_argv(["env", "HF_TOKEN=abc", "vllm", "--api-key", "sk-1", "--port", "8000"]) == [
        "env", "HF_TOKEN=***", "vllm", "--api-key", "***", "--port", "8000"]
    assert redact_command_line("env HF_TOKEN=abc vllm serve m") == "env 'HF_TOKEN=***' vllm serve m"


def test_data_is_masked_recursively_without_changing_the_input() -> None:
    plan = {"env": {"HF_TOKEN": "abc", "HIP_VISIBLE_DEVICES": "0,1"}, "argv": ["vllm", "--api-key", "k"],
            "command_line": "env HF_TOKEN=abc vllm", "nested": [{"password": "p"}]}
    out = redact_data(plan)
    assert out["env"] == {"HF_TOKEN": "***", "HIP_VISIBLE_DEVICES": "0,1"}
    assert out["argv"] == ["vllm", "--api-key", "***"]
    assert "abc" not in out["command_line"]
    assert out["nested"][0]["password"] == "***"
    assert plan["env"]["HF_TOKEN"] == "abc"
