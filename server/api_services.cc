#include "server/api_services.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace vocabd {

const char* const kApiServices[5] = {"vocabd.v1.ModelService", "vocabd.v1.EmbeddingService",
                                     "vocabd.v1.ScoringService", "vocabd.v1.PositionService",
                                     "vocabd.v1.TokenizerService"};

void BuildApiDescriptors() {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  for (const char* name : kApiServices) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    if (service == nullptr) continue;
    const google::protobuf::FileDescriptor* file = service->file();
    // Every message of the service's file and of the files it imports
    // (tensor.proto, rope.proto): their prototypes register the file's
    // default instances with the generated factory.
    for (int d = -1; d < file->dependency_count(); ++d) {
      const google::protobuf::FileDescriptor* f = d < 0 ? file : file->dependency(d);
      for (int i = 0; i < f->message_type_count(); ++i) {
        factory->GetPrototype(f->message_type(i));
      }
    }
  }
}

}  // namespace vocabd
