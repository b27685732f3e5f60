// The gRPC services vocabd registers (proto/vocabd/v1) and the descriptors
// they use.
#ifndef VOCABD_SERVER_API_SERVICES_H_
#define VOCABD_SERVER_API_SERVICES_H_

namespace vocabd {

// Full names of vocabd's services ("vocabd.v1.ModelService", ...), in the
// order health, logs and error messages list them. grpc.health.v1.Health and
// the reflection service are registered too but are not vocabd's API.
extern const char* const kApiServices[5];

// Builds, on the calling thread, the descriptors of every service in
// kApiServices, of their methods' request and response messages (with every
// message and enum of their .proto files) and the messages' default
// instances. protobuf builds a file's descriptors on first use, under a lock
// inside libprotobuf; VocabdServer::Create calls this before it starts any
// gRPC or HTTP thread, so requests only read descriptors that exist (the HTTP
// gateway's JSON mapping, the call tracker's field names, reflection) and the
// first request of each kind pays nothing for them. Idempotent and cheap
// after the first call.
void BuildApiDescriptors();

}  // namespace vocabd

#endif  // VOCABD_SERVER_API_SERVICES_H_
