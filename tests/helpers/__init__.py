"""What several test modules share: loopback servers (`openai_server`, `hub_server`), the labelled demo run
(`build`), tiny Qwen3 models (`tiny_qwen`), record factories and scripted stand-ins. No test module imports
another; they import from here (`tests/test_imports.py` checks it)."""
