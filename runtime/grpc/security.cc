#include "runtime/grpc/security.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "base/constant_time.h"
#include "base/net.h"
#include "base/status_macros.h"
#include "grpcpp/support/client_interceptor.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {
namespace {

constexpr char kAuthHeader[] = "authorization";
constexpr char kBearer[] = "Bearer ";
constexpr char kCommonName[] = "x509_common_name";

// The name a certificate carries as its DNS subject alternative name: the task name with
// ':' as '-' ("ps-0"). gRPC reads a ':' in the name it checks as the start of a port.
std::string DnsName(absl::string_view task_name) {
  return absl::StrReplaceAll(task_name, {{":", "-"}});
}

absl::Status BadFlag(absl::string_view flag, absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path, ": ", what));
}

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return BadFlag(flag, path, "no such file");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return BadFlag(flag, path, "cannot be read");
  return ss.str();
}

// Owners of OpenSSL objects.
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

absl::StatusOr<Cert> ParseCert(absl::string_view flag, const std::string& path,
                               const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) return BadFlag(flag, path, "not a PEM certificate");
  return cert;
}

std::string CommonName(X509* cert) {
  char buf[256] = {0};
  const int n =
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf));
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

// Checks that the key belongs to the certificate, the CA signed it and it names the task.
absl::Status CheckCertificate(const SecurityFlags& f, const std::string& cert_path,
                              const std::string& key_path, const std::string& ca_path,
                              const std::string& cert_pem, const std::string& key_pem,
                              const std::string& ca_pem, const std::string& task_name) {
  FULCRUM_ASSIGN_OR_RETURN(Cert cert, ParseCert("tls_cert", cert_path, cert_pem));
  FULCRUM_ASSIGN_OR_RETURN(Cert ca, ParseCert("tls_ca", ca_path, ca_pem));
  Bio key_bio = MemoryBio(key_pem);
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) return BadFlag("tls_key", key_path, "not a PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return BadFlag("tls_key", key_path, absl::StrCat("not the key of --tls_cert=", f.tls_cert));
  }
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr);
  if (X509_verify_cert(ctx.get()) != 1) {
    return BadFlag(
        "tls_cert", cert_path,
        absl::StrCat("not valid under --tls_ca=", ca_path, " (",
                     X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())), ")"));
  }
  const std::string cn = CommonName(cert.get());
  if (cn != task_name) {
    return BadFlag(
        "tls_cert", cert_path,
        absl::StrCat("its common name is '", cn, "', not this task's name '", task_name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  FULCRUM_ASSIGN_OR_RETURN(std::string token, ReadFlagFile("auth_token_file", path));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return BadFlag("auth_token_file", path,
                   "readable by group or others: the token is a secret (chmod 600 it)");
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return BadFlag("auth_token_file", path, "empty");
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return BadFlag("auth_token_file", path,
                     "the token must be printable ASCII without spaces (one line)");
    }
  }
  if (token.size() < kMinTokenBytes) {
    return BadFlag("auth_token_file", path,
                   absl::StrCat("the token is ", token.size(), " bytes; at least ", kMinTokenBytes,
                                " are needed (e.g. openssl rand -hex 32)"));
  }
  return token;
}

// Adds "authorization: Bearer <token>" to every call of a channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthHeader, header_});
    }
    methods->Proceed();
  }

 private:
  std::string header_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string header) : header_(std::move(header)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  std::string header_;
};

}  // namespace

absl::StatusOr<TransportSecurity> TransportSecurity::Load(const SecurityFlags& flags,
                                                          const std::string& task_name,
                                                          const std::string& dir_name) {
  auto expand = [&](const std::string& path) {
    return absl::StrReplaceAll(path, {{"{task}", dir_name}});
  };
  TransportSecurity s;
  const int tls_given = !flags.tls_cert.empty() + !flags.tls_key.empty() + !flags.tls_ca.empty();
  if (flags.insecure && (tls_given != 0 || !flags.auth_token_file.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--insecure with ", tls_given != 0 ? "--tls_cert/--tls_key/--tls_ca" : "",
                     tls_given != 0 && !flags.auth_token_file.empty() ? " and " : "",
                     flags.auth_token_file.empty() ? "" : "--auth_token_file",
                     ": --insecure means no credentials; drop it or the credential flags"));
  }
  s.insecure_ = flags.insecure;
  if (tls_given != 0 && tls_given != 3) {
    std::string missing;
    for (auto [name, value] :
         {std::pair<const char*, const std::string*>{"--tls_cert", &flags.tls_cert},
          {"--tls_key", &flags.tls_key},
          {"--tls_ca", &flags.tls_ca}}) {
      if (value->empty()) absl::StrAppend(&missing, missing.empty() ? "" : " and ", name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "mutual TLS needs --tls_cert, --tls_key and --tls_ca together; ", missing, " not given"));
  }
  if (tls_given == 3) {
    const std::string cert_path = expand(flags.tls_cert);
    const std::string key_path = expand(flags.tls_key);
    const std::string ca_path = expand(flags.tls_ca);
    FULCRUM_ASSIGN_OR_RETURN(s.cert_pem_, ReadFlagFile("tls_cert", cert_path));
    FULCRUM_ASSIGN_OR_RETURN(s.key_pem_, ReadFlagFile("tls_key", key_path));
    FULCRUM_ASSIGN_OR_RETURN(s.ca_pem_, ReadFlagFile("tls_ca", ca_path));
    FULCRUM_RETURN_IF_ERROR(CheckCertificate(flags, cert_path, key_path, ca_path, s.cert_pem_,
                                             s.key_pem_, s.ca_pem_, task_name));
    struct stat st {};
    if (::stat(key_path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      spdlog::warn("--tls_key={} is readable by group or others; chmod 600 it", key_path);
    }
  }
  if (!flags.auth_token_file.empty()) {
    FULCRUM_ASSIGN_OR_RETURN(s.token_, ReadToken(expand(flags.auth_token_file)));
  }
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::ChannelCredentials() const {
  if (!tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem_;
  options.pem_private_key = key_pem_;
  options.pem_cert_chain = cert_pem_;
  return grpc::SslCredentials(options);
}

void TransportSecurity::AddChannelArguments(const std::string& peer_task,
                                            grpc::ChannelArguments* args) const {
  // The server's certificate must name the task this channel is meant for (its DNS name
  // "ps-0"), whatever host it runs on: a worker's certificate cannot pose as a ps.
  if (tls()) args->SetSslTargetNameOverride(DnsName(peer_task));
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
TransportSecurity::ClientInterceptors() const {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> out;
  if (has_token()) {
    out.push_back(std::make_unique<TokenInterceptorFactory>(absl::StrCat(kBearer, token_)));
  }
  return out;
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ca_pem_;
  options.pem_key_cert_pairs.push_back({key_pem_, cert_pem_});
  return grpc::SslServerCredentials(options);
}

absl::Status TransportSecurity::CheckReachableOnlyLocally(absl::string_view what,
                                                          const std::string& host) const {
  if (!protected_mode() || IsLoopbackHost(host)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is ", host,
      ", not a loopback address, and this task has no credentials (protected mode answers "
      "only loopback peers): give every task --auth_token_file (the launchers make one) or "
      "--tls_cert, --tls_key and --tls_ca (scripts/make_certs.sh makes them), or --insecure to "
      "let anyone who reaches the ports call the tasks"));
}

absl::Status TransportSecurity::CheckSpecReachableOnlyLocally(const ClusterSpec& cluster) const {
  for (const char* job : {kChiefJob, kPsJob, kWorkerJob}) {
    for (int i = 0; i < cluster.num_tasks(job); ++i) {
      FULCRUM_RETURN_IF_ERROR(
          CheckReachableOnlyLocally(absl::StrCat(job, ":", i, "'s address in the cluster spec"),
                                    HostOf(cluster.address(job, i))));
    }
  }
  return absl::OkStatus();
}

void TransportSecurity::LogMode(const std::string& task_name) const {
  if (protected_mode()) {
    spdlog::info(
        "{}: protected mode (no credentials): RPCs are unencrypted and answer only loopback "
        "peers; for other hosts give every task --auth_token_file or mutual TLS",
        task_name);
  } else if (!tls() && !has_token()) {
    spdlog::warn(
        "{}: --insecure: RPCs are unauthenticated and unencrypted, and anyone who reaches this "
        "task's ports can call it",
        task_name);
  } else if (!tls()) {
    spdlog::warn(
        "{}: RPCs carry the --auth_token_file token but are unencrypted (the token travels in "
        "clear) and no task's identity can be proven without TLS; add --tls_cert, --tls_key "
        "and --tls_ca",
        task_name);
  } else {
    spdlog::info("{}: RPCs use mutual TLS (peers identified by their certificate's name){}",
                 task_name, has_token() ? " and the --auth_token_file token" : "");
  }
}

bool IsLocalPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:") ||
      peer == "inproc" || absl::StartsWith(peer, "inproc:")) {
    return true;
  }
  std::string host;
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    host = std::string(peer.substr(0, peer.rfind(':')));
  } else if (absl::ConsumePrefix(&peer, "ipv6:")) {
    host = absl::StrReplaceAll(peer.substr(0, peer.rfind(':')), {{"%5B", "["}, {"%5D", "]"}});
  } else {
    return false;
  }
  return IsLoopbackLiteral(host);
}

grpc::Status CallGuard::Authenticate(const grpc::ServerContext& context,
                                     absl::string_view method) const {
  if (local_only_ && !IsLocalPeer(context.peer())) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(method, ": refused ", context.peer(),
                                     ": this task has no credentials (protected mode) and "
                                     "answers only loopback peers"));
  }
  if (!token_.empty()) {
    bool ok = false;
    const auto& metadata = context.client_metadata();
    auto [begin, end] = metadata.equal_range(kAuthHeader);
    const std::string expected = absl::StrCat(kBearer, token_);
    for (auto it = begin; it != end; ++it) {
      ok |= ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()), expected);
    }
    if (!ok) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          absl::StrCat(method, ": missing or wrong auth token"));
    }
  }
  if (tls_ && PeerTask(context).empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(method, ": the caller has no verified certificate name"));
  }
  return grpc::Status::OK;
}

grpc::Status CallGuard::AuthorizeAs(const grpc::ServerContext& context, absl::string_view method,
                                    absl::string_view claimed_task) const {
  grpc::Status s = Authenticate(context, method);
  if (!s.ok() || !tls_) return s;
  const std::string peer = PeerTask(context);
  if (peer != claimed_task) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(method, " as '", claimed_task, "' refused: the caller is '",
                                     peer, "' (its certificate's name)"));
  }
  return grpc::Status::OK;
}

grpc::Status CallGuard::AuthorizeOnly(const grpc::ServerContext& context, absl::string_view method,
                                      absl::string_view only_task) const {
  grpc::Status s = Authenticate(context, method);
  if (!s.ok() || !tls_) return s;
  const std::string peer = PeerTask(context);
  if (peer != only_task) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(method, " refused: only ", only_task,
                                     " may call it, the caller is '", peer, "'"));
  }
  return grpc::Status::OK;
}

std::string CallGuard::PeerTask(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  const std::vector<grpc::string_ref> names = auth->FindPropertyValues(kCommonName);
  if (names.size() != 1) return "";
  return std::string(names[0].data(), names[0].size());
}

}  // namespace fulcrum::runtime
