# shellcheck shell=bash # read line by line by say.sh
# No isolated steps (steps-sizes.sh measures with the network only).
#: # no isolated steps
