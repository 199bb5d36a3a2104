# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=a.proto -DOUT=b.proto -P strip_services.cmake
# protoc-c's service stubs are unusable here (the method Register becomes the
# C keyword `register`) and unneeded (dp_grpc.c dispatches by path): give
# protoc-c the messages only.
file(READ ${IN} text)
string(REGEX REPLACE "service [A-Za-z]+ *{[^}]*}" "" text "${text}")
file(WRITE ${OUT} "${text}")
