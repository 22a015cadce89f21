"""The agent: one turn in, one reply out.

Routing, planning (rules offline; an LLM planner when configured), query rewriting, retrieval
through tools, the evidence gate, extractive answers with citations, citation validation and a
trace of every step, and the exit screen (`agent.screen`) that keeps credentials, personal data and
planted instructions out of every reply. Nothing here knows about Slack, Teams or HTTP.
"""
