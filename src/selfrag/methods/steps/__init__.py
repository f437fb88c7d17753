"""Pipeline steps several methods build from: the retrieval decision, evidence ranking, the joint
answer, facts first, choice reading, sufficiency, abstention and candidate reporting."""
