{
  "targets": [
    {
      "target_name": "ernic_native",
      "sources": ["ernic_native.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-std=gnu11"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
