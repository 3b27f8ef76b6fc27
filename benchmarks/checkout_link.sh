# Sourced by the GPU scripts from the checkout's root: models/ installs as rationale_cli.models, so
# a run from a checkout without installing sees it through a link made for the run and removed after it.
if [ ! -e rationale_cli/models ]; then
  ln -s ../models rationale_cli/models && trap 'rm -f rationale_cli/models' EXIT
fi
