"""What ``kubectl lws`` computes from what it reads: why, plan, tree, group actions.

Pure, like ``lws_operator.logic``; the controller and the webhooks never import it."""
