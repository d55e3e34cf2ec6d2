#!/bin/bash
# Runs inside the guest: the same steps as the libvfio-user gpio capture
# (fixtures/vfio-user/FORMAT.md, qemu-boot-lvu-gpio): lspci, config read,
# the stock gpio-pci-idio-16 driver, inputs read, outputs 0, 1 and 8 pulsed,
# inputs read again.
set -u
dev=/sys/bus/pci/devices/0000:00:03.0
lspci -nn -vv -d 494f:0dc8
od -A x -t x1 -N 64 $dev/config
modprobe gpio-pci-idio-16 || { echo "FAIL - modprobe gpio-pci-idio-16"; exit 1; }
cat /sys/kernel/debug/gpio
base=$(cat /sys/class/gpio/gpiochip*/base | head -1)
read_inputs() {
  local s=""
  for i in $(seq 16 31); do
    echo $((base + i)) > /sys/class/gpio/export 2>/dev/null
    s="$s$(cat /sys/class/gpio/gpio$((base + i))/value)"
  done
  echo "$s"
}
before=$(read_inputs)
echo "inputs before: $before"
for o in 0 1 8; do
  echo $((base + o)) > /sys/class/gpio/export 2>/dev/null
  echo out > /sys/class/gpio/gpio$((base + o))/direction
  echo 1 > /sys/class/gpio/gpio$((base + o))/value
  echo 0 > /sys/class/gpio/gpio$((base + o))/value
done
after=$(read_inputs)
echo "inputs after:  $after"
cat /sys/kernel/debug/gpio
[ "$before" = 1111111111111111 ] && [ "$after" = 0011111101111111 ] && echo "ok   - inputs follow the outputs as the sample does" || { echo "FAIL - inputs"; exit 1; }
