"""The tool-first LLM planner and what it needs: a budgeted OpenAI-compatible client, prompts,
compliance checks and caches. Used when an OpenAI key or base URL is configured; the rule-based
planner serves otherwise and is the fallback whenever the LLM path fails.
"""
